"""Batch, eval and RL runs: many tasks, each in a fresh workspace copy, scored and recorded.

``tasks`` reads the task file, ``workspace`` copies and diffs workspaces, ``worker`` runs one
rollout (the function both backends execute), ``outputs`` owns the output folder (resumption),
``summary`` aggregates results, ``backends`` hands rollouts to a local process pool or to Ray.
The ``roder batch`` and ``roder exec`` commands (roder_tui.commands) are thin clients of these.
"""
