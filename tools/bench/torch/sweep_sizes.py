"""The message sizes of the torch benchmarks' sweeps (allreduce_bench.py,
gather_scatter_bench.py): sizes written as kolo-bench takes them (4K, 1M) and the sweep from -b
to -e by the factor -f."""


def parse_size(text):
    """Bytes of a size with an optional K, M or G suffix."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def sizes(low, high, factor):
    """low, low * factor, ... up to high."""
    size = low
    while size <= high:
        yield size
        size *= factor
