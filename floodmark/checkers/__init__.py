"""Checkers: the product's judgement over a recorded history and the nodes' events."""
