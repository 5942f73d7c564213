"""nemesis"""
