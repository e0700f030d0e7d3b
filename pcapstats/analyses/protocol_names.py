"""The names tshark 4.0 gives the protocols a header's type field hands on to.

The protocol hierarchy names every protocol as tshark does (its filter name, which
``tshark -q -z io,phs`` prints): the protocol an ethertype, an IP protocol number, a Linux
cooked capture's protocol field or a link type carries.  These are tshark 4.0.17's dissector
tables ``ethertype``, ``ip.proto`` and ``sll.ltype`` as ``tshark -G decodes`` lists them;
``tests/analyses/test_hierarchy.py`` holds them to the installed tshark's.  A value tshark has
no dissector for is ``data`` (tshark hands the bytes to its data dissector).
"""

from __future__ import annotations

DATA = "data"      # tshark's name for bytes no dissector claims

ETHERTYPES: dict[int, str] = {
    0x0059: 'pppmux', 0x0061: 'crtp', 0x0065: 'crtp_cntcp', 0x0067: 'crtp_cudp8',
    0x00FD: 'comp_data', 0x0600: 'idp', 0x0641: 'roofnet', 0x0643: 'roofnet', 0x0644: 'roofnet',
    0x0645: 'roofnet', 0x0712: 'mdp', 0x0713: 'mdp', 0x0800: 'ip', 0x0806: 'arp', 0x0842: 'wol',
    0x08F0: 'm2m', 0x08FF: 'bpq', 0x0BAD: 'vines_ip', 0x0BAF: 'vines_echo', 0x0C15: 'c15hbeat',
    0x2001: 'cgmp', 0x2065: 'crtp_cs', 0x2067: 'crtp_cudp16', 0x22E5: 'gmhdr', 0x22EA: 'mrp-msrp',
    0x22F0: 'ieee1722', 0x22F1: 'rohc', 0x22F3: 'trill', 0x22F4: 'isis', 0x2323: 'dect',
    0x2452: 'wlan_centrino', 0x3E3F: 'epl_v1', 0x4305: 'batadv', 0x4742: 'c15.ch',
    0x6000: 'lapbether', 0x6003: 'dec_dna', 0x6004: 'lat', 0x6558: 'eth', 0x8021: 'ipcp',
    0x8023: 'osinlcp', 0x8035: 'arp', 0x8038: 'dec_stp', 0x8057: 'ipv6cp', 0x8059: 'pppmuxcp',
    0x809A: 'wpan', 0x809B: 'llap', 0x80D5: 'snaeth', 0x80E1: 'dlr', 0x80F3: 'aarp',
    0x80FD: 'ccp', 0x80FF: 'wcp', 0x8100: 'vlan', 0x8102: 'bofl', 0x8103: 'lacp', 0x8133: 'nsrp',
    0x8137: 'ipx', 0x814C: 'snmp', 0x8181: 'stp', 0x81FD: 'ismp', 0x8204: 'lwl4', 0x8207: 'cdpcp',
    0x8281: 'mplscp', 0x86DD: 'ipv6', 0x872D: 'wlccp', 0x8783: 'mint', 0x8808: 'macc',
    0x8809: 'slow', 0x8847: 'mpls', 0x8848: 'mpls', 0x8863: 'pppoed', 0x8864: 'pppoes',
    0x886C: 'hpna', 0x886D: 'ans', 0x886F: 'msnlb', 0x8870: 'llc', 0x8874: 'brcm-tag',
    0x887B: 'homeplug', 0x888E: 'eapol', 0x8892: 'pn_rt', 0x8899: 'realtek', 0x889A: 'hyperscsi',
    0x889B: 'csm_encaps', 0x88A1: 'telkonet', 0x88A2: 'aoe', 0x88A4: 'ecatf',
    0x88A8: 'ieee8021ad', 0x88A9: 'extrememesh', 0x88AB: 'epl', 0x88AE: 'brdwlk', 0x88B4: 'wai',
    0x88B7: 'ieee802a', 0x88B8: 'goose', 0x88BA: 'sv', 0x88BB: 'lwapp', 0x88C7: 'eapol',
    0x88CA: 'tipc', 0x88CC: 'lldp', 0x88CD: 'siii', 0x88D8: 'cesoeth', 0x88D9: 'lltd',
    0x88DC: 'wsmp', 0x88DE: 'vmlab', 0x88E1: 'homeplug-av', 0x88E3: 'pn_mrp', 0x88E5: 'macsec',
    0x88E7: 'ieee8021ah', 0x88EE: 'elmi', 0x88F5: 'mrp-mvrp', 0x88F6: 'mrp-mmrp', 0x88F7: 'ptp',
    0x88F8: 'ncsi', 0x88FB: 'hsr_prp_supervision', 0x8901: 'flip', 0x8902: 'cfm', 0x8906: 'fcoe',
    0x8909: 'cmd', 0x890D: 'wlan', 0x8911: 'linx', 0x8914: 'fip', 0x8915: 'infiniband',
    0x8917: 'mih', 0x891D: 'tte_pcf', 0x8926: 'vntag', 0x892D: 'bluecom', 0x892F: 'hsr',
    0x893A: 'ieee1905', 0x893F: 'etag', 0x8940: 'ecp21', 0x8942: 'lldp', 0x8947: 'gnw',
    0x894F: 'nsh', 0x8988: 'hbbak', 0x8FFD: 'aruba_iap', 0x9000: 'loop', 0x9021: 'rtmac',
    0x9022: 'rtcfg', 0x9100: 'vlan', 0x9104: 'eero', 0x99FE: 'tecmp', 0xA0ED: '6lowpan',
    0xAAAA: 'wreth', 0xABCD: 'brdwlk', 0xAEFE: 'ecpri', 0xB4E3: 'cl3', 0xBBBB: 'lwapp',
    0xC021: 'lcp', 0xC023: 'pap', 0xC029: 'cbcp', 0xC02B: 'bacp', 0xC02D: 'bap', 0xC0DE: 'xip',
    0xC0DF: 'nwp', 0xC223: 'chap', 0xCAFE: 'llt', 0xD00D: 'tdmoe', 0xD28B: 'avsp', 0xE555: 'exeh',
    0xF052: 'hcrt', 0xF1C1: 'ieee8021cb', 0xFCFC: 'mdshdr',
}

IP_PROTOCOLS: dict[int, str] = {
    0: 'ipv6.hopopts', 1: 'icmp', 2: 'igmp', 4: 'ip', 6: 'tcp', 9: 'igrp', 17: 'udp', 29: 'cotp',
    33: 'dccp', 36: 'xtp', 41: 'ipv6', 43: 'ipv6.routing', 44: 'ipv6.fraghdr', 46: 'rsvp',
    47: 'gre', 48: 'dsr', 50: 'esp', 51: 'ah', 53: 'swipe', 54: 'nhrp', 58: 'icmpv6',
    60: 'ipv6.dstopts', 62: 'mipv6', 80: 'osi', 83: 'vines_frp', 88: 'eigrp', 89: 'ospf',
    93: 'ax25', 97: 'etherip', 103: 'pim', 106: 'lwl4', 108: 'ipcomp', 112: 'vrrp', 113: 'pgm',
    115: 'l2tp', 132: 'sctp', 134: 'rsvp-e2ei', 135: 'mipv6', 136: 'udplite', 137: 'mpls',
    139: 'hip', 140: 'shim6', 143: 'eth', 173: 'ax4000', 224: 'ncs',
}

# a Linux cooked capture's protocol field under 0x0600 (not an ethertype: ARPHRD-specific)
SLL_PROTOCOLS: dict[int, str] = {
    0x0001: 'ipx', 0x0003: 'eth', 0x0004: 'llc', 0x0007: 'ppp', 0x000C: 'can', 0x000D: 'canfd',
    0x0017: 'irlap', 0x0030: 'ipos', 0x0031: 'ipos', 0x0032: 'ipos', 0x0033: 'ipos',
    0x0034: 'ipos', 0x0035: 'ipos', 0x00F5: 'isi', 0x00F6: 'wpan',
}

# link types the reader does not decode (it counts their packets and warns): the protocol tshark
# shows first for each (its encapsulation's dissector, checked with tshark 4.0.17)
OTHER_LINK_TYPES: dict[int, str] = {
    9: 'ppp', 50: 'ppp', 104: 'chdlc', 189: 'usb', 192: 'ppi', 195: 'wpan', 220: 'usb',
    **dict.fromkeys(range(147, 163), 'user_dlt'),      # DLT_USER0 .. DLT_USER15
}


def ethertype(value: int) -> str:
    return ETHERTYPES.get(value, DATA)


def ip_protocol(value: int) -> str:
    return IP_PROTOCOLS.get(value, DATA)


def sll_protocol(value: int) -> str:
    return SLL_PROTOCOLS.get(value, DATA)


def link_type(value: int) -> str:
    """tshark's first protocol on a link type the reader does not decode; one pcapstats has
    not checked is named by its number."""
    return OTHER_LINK_TYPES.get(value, f"linktype {value}")
