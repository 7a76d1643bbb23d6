"""The reference page's 8B operating point, shared by the planner tests."""

from __future__ import annotations

# ~1500 s/step, 128 x 16 = 2048 trajectories per step, measured T_bcast 1437 s, S = 3.
T_TRAIN_S, T_BCAST_S, BATCH, KAPPA = 1500.0, 1437.0, 2048, 2
PARAMS_8B = 8.2e9
MU_WORKER = 0.33  # per-worker rate the page back-solved from its two fleet sizes
BW_MBPS = 100.0  # per-worker downlink
