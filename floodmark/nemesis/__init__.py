"""Nemeses: the faults a run injects, one kind per module (partition, clock, pause, disk, kill).

A nemesis offers shapes and decides, from the seed and the cluster's current roles, which
nodes a fault hits; ``compose`` holds one per kind and heals them together.
"""
