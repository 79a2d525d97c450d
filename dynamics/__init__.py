"""Time evolution: jit+scan training, vmapped sweeps, ODEs; one Trajectory type for all."""
from dynamics.optimizers import OPTIMIZERS as OPTIMIZERS
from dynamics.optimizers import base_optimizer as base_optimizer
from dynamics.optimizers import masked_optimizer as masked_optimizer
from dynamics.sweep import run_sweep as run_sweep
from dynamics.sweep import sweep_mesh as sweep_mesh
from dynamics.train import TrainConfig as TrainConfig
from dynamics.train import make_train as make_train
from dynamics.train import minibatch as minibatch
from dynamics.trajectory import Trajectory as Trajectory
