"""The durable peers' side of `python -m bench peers`: drivers that run in each peer's own
virtual environment (bench/peer_envs.py makes them), so nothing here imports tempi."""
