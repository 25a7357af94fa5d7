"""Applications at the top of the arrows: CLI, benchmarks, demo, deployment, services, report.

Applications may start flows and read every layer below; nothing below imports them.
"""
