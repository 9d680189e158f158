"""Differential fuzzing of the interpreter against the TOSA reference model."""
