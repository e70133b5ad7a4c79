"""The reference's worked addressing tables (hardware-and-fabric.md section 4): node, rank, netdev, HCA,
the node it faces, address."""

TRIANGLE = [
    ("dgx1", 0, "enp1s0f0np0", "rocep1s0f0", "dgx2", "10.12.1.1/24"),
    ("dgx1", 0, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx2", "10.12.2.1/24"),
    ("dgx1", 0, "enp1s0f1np1", "rocep1s0f1", "dgx3", "10.13.1.1/24"),
    ("dgx1", 0, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx3", "10.13.2.1/24"),
    ("dgx2", 1, "enp1s0f0np0", "rocep1s0f0", "dgx3", "10.23.1.2/24"),
    ("dgx2", 1, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx3", "10.23.2.2/24"),
    ("dgx2", 1, "enp1s0f1np1", "rocep1s0f1", "dgx1", "10.12.1.2/24"),
    ("dgx2", 1, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx1", "10.12.2.2/24"),
    ("dgx3", 2, "enp1s0f0np0", "rocep1s0f0", "dgx1", "10.13.1.3/24"),
    ("dgx3", 2, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx1", "10.13.2.3/24"),
    ("dgx3", 2, "enp1s0f1np1", "rocep1s0f1", "dgx2", "10.23.1.3/24"),
    ("dgx3", 2, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx2", "10.23.2.3/24"),
]

RING = [
    ("dgx1", 0, "enp1s0f0np0", "rocep1s0f0", "dgx2", "10.12.1.1/24"),
    ("dgx1", 0, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx2", "10.12.2.1/24"),
    ("dgx1", 0, "enp1s0f1np1", "rocep1s0f1", "dgx4", "10.14.1.1/24"),
    ("dgx1", 0, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx4", "10.14.2.1/24"),
    ("dgx2", 1, "enp1s0f0np0", "rocep1s0f0", "dgx3", "10.23.1.2/24"),
    ("dgx2", 1, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx3", "10.23.2.2/24"),
    ("dgx2", 1, "enp1s0f1np1", "rocep1s0f1", "dgx1", "10.12.1.2/24"),
    ("dgx2", 1, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx1", "10.12.2.2/24"),
    ("dgx3", 2, "enp1s0f0np0", "rocep1s0f0", "dgx4", "10.34.1.3/24"),
    ("dgx3", 2, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx4", "10.34.2.3/24"),
    ("dgx3", 2, "enp1s0f1np1", "rocep1s0f1", "dgx2", "10.23.1.3/24"),
    ("dgx3", 2, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx2", "10.23.2.3/24"),
    ("dgx4", 3, "enp1s0f0np0", "rocep1s0f0", "dgx1", "10.14.1.4/24"),
    ("dgx4", 3, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx1", "10.14.2.4/24"),
    ("dgx4", 3, "enp1s0f1np1", "rocep1s0f1", "dgx3", "10.34.1.4/24"),
    ("dgx4", 3, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx3", "10.34.2.4/24"),
]

PAIR = [
    ("dgx1", 0, "enp1s0f0np0", "rocep1s0f0", "dgx2", "10.12.1.1/24"),
    ("dgx1", 0, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx2", "10.12.2.1/24"),
    ("dgx1", 0, "enp1s0f1np1", "rocep1s0f1", "dgx2", "10.12.3.1/24"),
    ("dgx1", 0, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx2", "10.12.4.1/24"),
    ("dgx2", 1, "enp1s0f0np0", "rocep1s0f0", "dgx1", "10.12.3.2/24"),
    ("dgx2", 1, "enP2p1s0f0np0", "roceP2p1s0f0", "dgx1", "10.12.4.2/24"),
    ("dgx2", 1, "enp1s0f1np1", "rocep1s0f1", "dgx1", "10.12.1.2/24"),
    ("dgx2", 1, "enP2p1s0f1np1", "roceP2p1s0f1", "dgx1", "10.12.2.2/24"),
]
