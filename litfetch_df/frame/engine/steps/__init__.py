"""The steps of the row pipeline, one module each, as values the engine runs.

:mod:`~litfetch_df.frame.engine.steps.resolve` is the batch pre-pass over the whole
frame; the others are :class:`~litfetch_df.frame.engine.runner.UnitStep` values done
once per id bundle: :mod:`~litfetch_df.frame.engine.steps.bodies`,
:mod:`~litfetch_df.frame.engine.steps.files`, :mod:`~litfetch_df.frame.engine.steps.licences`,
:mod:`~litfetch_df.frame.engine.steps.related`; :mod:`~litfetch_df.frame.engine.steps.downloads`
works on the long file-set frame, one unit per file.
"""
