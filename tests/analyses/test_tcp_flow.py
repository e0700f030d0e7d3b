"""Where a TCP capture was taken and the sender's segment size (pcapstats.analyses.tcp_flow),
on hand-built conversations whose answer is known by construction:

- the side from each evidence alone: a handshake with a 20 ms round trip seen at either end or
  split evenly (the middle); a handshake of microseconds (no propagation delay: it tells
  nothing) with data leaving right after each ACK (the sender) or ACKs right after the data
  (the receiver); TTLs only (an initial TTL on one direction and not the other; on neither:
  the middle), when nothing else tells;
- the segment size: the SYNs' MSS option less the timestamp option on the data, whatever the
  segment lengths (segmentation offload shows 2 and 3 MSS at once); without a SYN, the common
  size whose multiples the other segments are; else the largest segment.
"""

from __future__ import annotations

import pytest

import pcapstats as ps
from pcapstats.analyses.tcp_flow import capture_side, data_direction, segment_size, stream_rows

from tests.helpers.conversation import A, CLIENT, PA, SA, S_, SERVER, P, write_conversation

SEG = 1448


def _flow(handshake_ms=(20.0, 0.01), *, ack_to_data_ms=0.005, data_to_ack_ms=0.5,
          data_ttl=64, ack_ttl=63, rounds=30, lengths=(SEG,), syn_opts=(), data_opts=(),
          handshake=True):
    """A client sending data in rounds: each server ACK is answered by new data
    ``ack_to_data_ms`` later, each data burst's ACK follows ``data_to_ack_ms`` after it."""
    first, second = handshake_ms
    packets = []
    if handshake:
        packets += [P(CLIENT, 0, S_, 0, 0, opts=syn_opts, ttl=data_ttl),
                    P(SERVER, first, SA, 0, 1, opts=syn_opts, ttl=ack_ttl),
                    P(CLIENT, first + second, A, 1, 1, ttl=data_ttl)]
    t, seq = first + second + 1.0, 1
    for k in range(rounds):
        size = lengths[k % len(lengths)]
        packets.append(P(CLIENT, t, PA, seq, 1, size, opts=data_opts, ttl=data_ttl))
        seq += size
        t += data_to_ack_ms
        packets.append(P(SERVER, t, A, 1, seq, ttl=ack_ttl))
        t += ack_to_data_ms
    return packets


def _side(tmp_path, packets):
    cap = ps.read(write_conversation(packets, tmp_path / "c.pcap"))
    df = stream_rows(cap, 0)
    return capture_side(df, data_direction(df))


def test_handshake_tells_the_side_when_it_spans_a_round_trip(tmp_path):
    assert _side(tmp_path, _flow((20.0, 0.01)))[0] == "sender"
    side, text = _side(tmp_path, _flow((0.01, 20.0), ack_to_data_ms=5, data_to_ack_ms=0.005,
                                       data_ttl=63, ack_ttl=64))
    assert side == "receiver" and "captured near the server" in text
    side, text = _side(tmp_path, _flow((10.0, 10.0), data_ttl=62, ack_ttl=62))
    assert side == "middle" and "middle of the path" in text


def test_a_handshake_of_microseconds_leaves_it_to_the_triggers(tmp_path):
    side, text = _side(tmp_path, _flow((0.011, 0.005), data_ttl=64, ack_ttl=64))
    assert side == "sender" and "data leaves at the ACKs" in text and "too short" in text
    side, text = _side(tmp_path, _flow((0.011, 0.005), ack_to_data_ms=0.6, data_to_ack_ms=0.008,
                                       data_ttl=64, ack_ttl=64))
    assert side == "receiver" and "ACKs answer the data" in text


def test_ttls_tell_when_timing_does_not(tmp_path):
    even = dict(handshake_ms=(0.01, 0.01), ack_to_data_ms=0.5, data_to_ack_ms=0.5)
    assert _side(tmp_path, _flow(**even, data_ttl=64, ack_ttl=61))[0] == "sender"
    assert _side(tmp_path, _flow(**even, data_ttl=125, ack_ttl=128))[0] == "receiver"
    side, text = _side(tmp_path, _flow(**even, data_ttl=62, ack_ttl=250))
    assert side == "middle" and "TTL of the data 62, of the ACKs 250" in text
    side, text = _side(tmp_path, _flow(**even, data_ttl=64, ack_ttl=64, handshake=False))
    assert side == "unknown" and "no router on the path" in text


def _mss(tmp_path, packets):
    cap = ps.read(write_conversation(packets, tmp_path / "m.pcap"))
    df = stream_rows(cap, 0)
    return segment_size(df, data_direction(df))


TS = ("NOP", None), ("NOP", None), ("Timestamp", (1, 0))


def test_segment_size_is_the_mss_option_less_the_options_not_the_largest_segment(tmp_path):
    mss, text = _mss(tmp_path, _flow(lengths=(SEG, 2 * SEG, 3 * SEG),
                                     syn_opts=(("MSS", 1460),), data_opts=TS))
    assert mss == 1448 and "offload" in text
    assert _mss(tmp_path, _flow(lengths=(1460, 700), syn_opts=(("MSS", 1460),)))[0] == 1460


def test_segment_size_from_the_lengths_without_a_syn(tmp_path):
    mss, text = _mss(tmp_path, _flow(lengths=(2 * SEG, SEG, 4 * SEG, 3 * SEG), handshake=False))
    assert mss == SEG and "multiples" in text
    assert _mss(tmp_path, _flow(lengths=(1000, 1300, 1400), handshake=False)) == \
        (1400, "no MSS option seen; the largest segment")


@pytest.mark.parametrize("lengths", [(SEG,), (SEG, 2 * SEG)])
def test_cwnd_reports_the_segment_size(tmp_path, lengths):
    path = write_conversation(_flow(lengths=lengths, syn_opts=(("MSS", 1460),), data_opts=TS),
                              tmp_path / "c.pcap")
    assert ps.cwnd(path).mss_bytes == SEG
