"""Dataset layer: corpus readers, validation, aligners, token end times, shards and manifests.

Plain typed functions; nothing here imports Prefect (see ../shared/DESIGN.md, "Layers").
"""
