"""Column names shared by the overlay, Scribe and TNO frames (GraphFrame layout: `id`; edges `src`/`dst`)."""

ID = "id"                  # a node's number (vertex key)
SRC, DST = "src", "dst"    # an edge: routing-table entry, or tree edge child -> parent
AT = "at"                  # the node an in-flight message is at
TIME = "time"              # when a notification reaches a subscriber (TNO's logs and check)
TOPIC = "topic"            # a topic's number (rank)
NODE = "node"              # a node in a per-topic frame (member, subscriber, root)
LAST = "last"              # the last sequence number a subscriber was delivered
SUBSCRIBER, MEMBER = "subscriber", "member"   # TNO sequencing-group frames
