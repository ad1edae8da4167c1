"""What kolo.ray and kolo.spark share, without importing Ray or Spark: the environment that makes
a process a kolo rank (ranks.py), where kolorun is (paths.py), and kolorun's elastic driver run
for an engine that starts the workers itself (elastic.py, proxy.py). docs/ENGINES.md.
"""
