"""Presentation of iowhy's figures: terminal tables, histograms, matplotlib figures, HTML."""
