"""Recording: the session that runs backends (backends/) on a live tree, end-of-recording probes
(probes/, pystacks), one-shot snapshots, the bundled demo and the doctor. May import every
package but render."""
