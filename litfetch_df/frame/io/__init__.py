"""The DataFrame face's reading and writing: the tables users hold (PubMed exports, CSV,
Parquet), the identifier columns in them, typed cells and columns, and the bodies and files
a run writes under ``out_dir`` (a local directory or an fsspec URL). It imports neither the
engine nor the face above it.
"""
