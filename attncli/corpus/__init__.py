"""Corpora: batch (batch), the one process pool (workers), the Dask path (cluster), stats'
running sums (stats) and the survey that runs a corpus into them (survey).
"""
