"""Build the optional C ingest kernel; without a compiler the install still works (numpy fallback)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("pcapstats.ingest._kernel", ["pcapstats/ingest/_kernel.c"],
                             extra_compile_args=["-O2", "-std=c99"], optional=True)])
