"""The Spark runtime: a ``Job`` plans its start, runs the key groups (the stateful
function) inside ``applyInPandasWithState``, and commits each micro-batch on the
driver (sink, checkpoints, clock, progress). Also the choice of recovery path,
rescaling, delivery guarantees, heartbeats and what a running job shows. Imports
every room below it."""
