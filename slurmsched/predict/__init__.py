"""Duration predictors: pure functions of job history (no Slurm, no database imports).

* :mod:`~slurmsched.predict.protocol`: the ``Predictor`` / ``StagedPredictor`` protocols.
* :mod:`~slurmsched.predict.registry`: ``make_predictor(name)`` for ``slurmsched``
  (default, :mod:`~slurmsched.predict.gbm`), ``helios``, ``last2`` and ``user_limit``
  (:mod:`~slurmsched.predict.baselines`).
* :mod:`~slurmsched.predict.schedule`: ``RefitSchedule``, when to refit.
* :mod:`~slurmsched.predict.evaluate` and :mod:`~slurmsched.predict.metrics`: the
  online, time-ordered evaluation behind ``slurmsched predict evaluate``.
"""
