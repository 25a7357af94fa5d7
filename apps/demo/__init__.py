"""`reflexmem demo`: the main job on the embedded defaults, stage by stage."""
