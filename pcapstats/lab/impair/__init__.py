"""Loss, delay, jitter and rate: asked once (:class:`Impairment`), set by one mechanism each, on a
lab router's forwarding path or on a host's own interface, and undone on every exit path.

- :mod:`.mechanisms`: what can be asked and how each mechanism is told it -- netem's and tbf's
  words, the NFQUEUE delay line's command and start -- and the one probe (kept a process) that
  chooses netem where the kernel has it, else the fallback;
- :mod:`.router`: a lab's bottleneck, toward the receivers and back (``lab run``, ``matrix``);
- :mod:`.host`: a host's own interface, its egress (``capture``, ``netem``);
- :mod:`.state`: the record of what was set on a host's interface, which any later process
  can show and remove.

    from pcapstats.lab.impair import Impairment, apply
    applied = apply(lab, lab.bottleneck, Impairment.from_text(loss="10%", delay="20ms"))
"""

from pcapstats.lab.impair.mechanisms import MECHANISMS, Impairment, netem_available
from pcapstats.lab.impair.router import Applied, Counters, apply

__all__ = ["MECHANISMS", "Applied", "Counters", "Impairment", "apply", "netem_available"]
