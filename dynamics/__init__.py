"""Time evolution: jit+scan training, vmapped sweeps, ODEs; one Trajectory type for all.

``dir(dynamics)`` lists the functions and classes (``__all__``), not the files that hold them
(``dynamics.train`` holds ``make_train``): a module and a function never share a name here.
"""
from attndyn.dynamics.optimizers import OPTIMIZERS as OPTIMIZERS
from attndyn.dynamics.optimizers import base_optimizer as base_optimizer
from attndyn.dynamics.optimizers import masked_optimizer as masked_optimizer
from attndyn.dynamics.optimizers import trainable_mask as trainable_mask
from attndyn.tasks.errors import ConfigError as ConfigError
from attndyn.dynamics.sweep import chunk_bounds as chunk_bounds
from attndyn.dynamics.sweep import run_sweep as run_sweep
from attndyn.dynamics.sweep import sweep_mesh as sweep_mesh
from attndyn.dynamics.train import TrainConfig as TrainConfig
from attndyn.dynamics.train import make_train as make_train
from attndyn.dynamics.train import minibatch as minibatch
from attndyn.dynamics.train import minibatch_value_and_grad as minibatch_value_and_grad
from attndyn.dynamics.train import steps_per_epoch as steps_per_epoch
from attndyn.dynamics.trajectory import Trajectory as Trajectory
from attndyn.dynamics.ode import gradient_flow as gradient_flow
from attndyn.dynamics.reduced_ode import reduced_sen_ode as reduced_sen_ode
from attndyn.dynamics.reduced_ode_sweep import reduced_sen_ode_sweep as reduced_sen_ode_sweep
from attndyn.dynamics.flow_time import at_learning_rate as at_learning_rate
from attndyn.dynamics.flow_time import flow_time_grid as flow_time_grid
from attndyn.dynamics.early_stopping import EarlyStopped as EarlyStopped
from attndyn.dynamics.early_stopping import make_train_early_stopping as make_train_early_stopping
from attndyn.dynamics.fast_lu import FastPathCheck as FastPathCheck
from attndyn.dynamics.fast_lu import fast_path_applies as fast_path_applies
from attndyn.dynamics.fast_lu import make_fast_sweep_train as make_fast_sweep_train
from attndyn.dynamics.fast_lu import make_fast_train as make_fast_train
from attndyn.dynamics.auto_train import TrainChoice as TrainChoice
from attndyn.dynamics.auto_train import make_auto_train as make_auto_train
from attndyn.dynamics.sde import reduced_sgd_sde as reduced_sgd_sde
from attndyn.dynamics.sde import sgd_sde as sgd_sde
from attndyn.dynamics.epochs import make_epoch_train as make_epoch_train
from attndyn.dynamics.segmented import SegmentState as SegmentState
from attndyn.dynamics.segmented import run_segments as run_segments
from attndyn.dynamics.trajectory import FAILURE_REASONS as FAILURE_REASONS
from attndyn.dynamics.trajectory import ODEStats as ODEStats
from attndyn.dynamics.strategy import Plan as Plan
from attndyn.dynamics.strategy import StagePlan as StagePlan
from attndyn.dynamics.strategy import plan as plan
# XLA compile-time tuning of the CLI's stages (dynamics.xla_options): internal, not API.
from attndyn.dynamics.fast_lu import COMPILER_OPTIONS as _FAST_COMPILER_OPTIONS
from attndyn.dynamics.reduced_ode import COMPILER_OPTIONS as _REDUCED_ODE_COMPILER_OPTIONS
from attndyn.dynamics.reduced_ode import LINEAR_COMPILER_OPTIONS as _REDUCED_ODE_LINEAR_COMPILER_OPTIONS

__all__ = ["ConfigError", "OPTIMIZERS", "base_optimizer", "masked_optimizer", "trainable_mask",
           "chunk_bounds", "run_sweep", "sweep_mesh", "TrainConfig", "make_train", "minibatch",
           "Trajectory", "gradient_flow", "reduced_sen_ode", "reduced_sen_ode_sweep",
           "at_learning_rate", "flow_time_grid", "EarlyStopped", "make_train_early_stopping",
           "FastPathCheck", "fast_path_applies", "make_fast_sweep_train", "make_fast_train",
           "TrainChoice", "make_auto_train", "reduced_sgd_sde", "sgd_sde", "make_epoch_train",
           "SegmentState", "run_segments", "FAILURE_REASONS", "ODEStats", "Plan", "StagePlan",
           "plan"]


def __dir__():
  return sorted(__all__)
