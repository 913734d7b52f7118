"""TNO: total notification order over topics (sequencing groups, sequencer, ordering layer)."""
