"""Build the optional C extensions (the ingest kernel, the TCP sequence analyser); without a
compiler the install still works (numpy / Python fallbacks)."""
from setuptools import Extension, setup

_C = dict(extra_compile_args=["-O2", "-std=c99"], optional=True)

setup(ext_modules=[Extension("pcapstats.ingest._kernel", ["pcapstats/ingest/_kernel.c"], **_C),
                   Extension("pcapstats.analyses.tcpseq._tcpseq",
                             ["pcapstats/analyses/tcpseq/_tcpseq.c"], **_C)])
