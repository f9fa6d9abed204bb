"""rig package."""
