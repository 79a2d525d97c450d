"""The attndyn command line: configs, presets, the run pipeline and its outputs."""
