"""Helpers the test modules share (fakes, builders, run directories); no test module imports another."""
