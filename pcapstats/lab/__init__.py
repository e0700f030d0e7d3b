"""The lab: make real captures in network namespaces (hosts, veth links, traffic, tcpdump).

Only this package touches the host's network, and it undoes everything it made.
"""

from pcapstats.lab.netns import (PREFIX, CaptureStats, Interface, Lab, LabError, TcpdumpCapture,
                                 cleanup_leftovers)

__all__ = ["PREFIX", "CaptureStats", "Interface", "Lab", "LabError", "TcpdumpCapture",
           "cleanup_leftovers"]
