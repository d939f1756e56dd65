"""The request model: requests, their classes, device stages, flush generations and


call joins, one definition each."""
