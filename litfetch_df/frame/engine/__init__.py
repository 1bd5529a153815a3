"""The engine of the DataFrame face: what runs a ``.lit`` call's steps over a table.

``runner`` (the one runner), ``pipeline`` and ``onepass`` (chained calls and ``run()``),
``plan``, ``gates``, ``bulk`` with its ``primers``, ``outcome`` and ``fill`` (how a unit
ends and becomes cells), ``cost`` and ``spent`` (what a table costs, before and after),
``context`` and ``options`` (a call's settings), and ``steps/`` (one module per step).
It imports the frame's ``io`` package, never the face above it.
"""
