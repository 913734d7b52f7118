"""The tables each experiment writes, declared once: name, meaning, and each column's unit and meaning.

An experiment's `simulate` returns an `Outcome`: its tables by these names (the run machinery
checks them against the declarations and writes them) and the notes its `report` quotes. The docs'
pages are generated from these declarations, and the paper-vs-simulation report reads the tables
through them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Column:
    """One column: its name, its unit ("" for counts, ids and labels) and what it holds."""

    name: str
    unit: str
    doc: str


@dataclass(frozen=True)
class Table:
    """One CSV table an experiment writes: `<name>.csv`, what a row is, and its columns in order."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    optional: bool = False   # written only under some parameters (its doc says which)

    @property
    def file(self) -> str:
        return f"{self.name}.csv"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def read(self, folder: Path) -> Any:
        """This table of a finished run (a pandas frame), checked against the declared columns."""
        import pandas as pd
        frame = pd.read_csv(folder / self.file)
        if list(frame.columns) != self.names:
            raise ValueError(f"{folder / self.file}: columns {list(frame.columns)}, declared {self.names}")
        return frame


def table(name: str, doc: str, *columns: tuple[str, str, str], optional: bool = False) -> Table:
    """Declare a table from (name, unit, meaning) triples."""
    return Table(name, doc, tuple(Column(*c) for c in columns), optional)


@dataclass
class Outcome:
    """What an experiment's `simulate` returns: its tables by name, and the notes its report quotes."""

    tables: dict[str, Any]                              # name -> pandas frame with the declared columns
    notes: dict[str, Any] = field(default_factory=dict)   # counts, labels and timings for the summary


PASTRY_HOPS = {t.name: t for t in (
    table("hops", "one row per overlay size: route lengths with proximity neighbor selection",
          ("nodes", "", "overlay size N"),
          ("lookups", "", "lookups routed between random distinct node pairs"),
          ("mean_hops", "hops", "mean route length over the lookups"),
          ("max_hops", "hops", "longest route among the lookups"),
          ("log_2b_n", "hops", "log base 2^b of N, the expected bound on route length")),
    table("hop_distribution", "one row per (overlay size, route length), proximity neighbor selection",
          ("nodes", "", "overlay size N"),
          ("hops", "hops", "route length"),
          ("fraction", "share", "share of the lookups that took this many hops")),
    table("distance", "one row per (overlay size, neighbor selection mode)",
          ("nodes", "", "overlay size N"),
          ("mode", "", "neighbor selection: proximity or random"),
          ("mean_relative_distance", "",
           "mean ratio of route distance to the direct source-to-destination distance")),
    table("timings", "one row per (overlay size, neighbor selection mode): wall-clock seconds",
          ("nodes", "", "overlay size N"),
          ("mode", "", "neighbor selection: proximity or random"),
          ("build_s", "s", "wall time to build the converged node state"),
          ("route_s", "s", "wall time to route the lookups and aggregate them"),
          ("lookups", "", "lookups routed")),
)}

PASTRY_FAILURES = {t.name: t for t in (
    table("failures", "one row per phase: before, after_failure (no repair), after_repair",
          ("phase", "", "before, after_failure or after_repair (lazy repair: its first pass)"),
          ("lookups", "", "lookups routed (the same random keys and sources in every phase)"),
          ("mean_hops", "hops", "mean route length (timeouts are not counted as hops)"),
          ("correct_fraction", "share", "share of lookups that ended at the closest live node"),
          ("repair_messages_per_failed_node", "",
           "repair messages (leaf set and routing table) per failed node; 0 without repair"),
          ("repair_rpcs_per_failed_node", "",
           "repair RPCs (a request and its reply) per failed node; 0 without repair"),
          ("timeouts_per_lookup", "", "mean number of timeouts on dead nodes per lookup"),
          ("rare_case_hops", "hops", "hops taken by the rare-case routing rule, summed over all lookups"),
          ("max_hops", "hops", "longest route among the lookups"),
          ("mean_distance", "",
           "mean route distance in the proximity model's units (ms for transit-stub and matrix)")),
    table("repair", "one row: the repair's cost over all passes, and per failed node",
          ("failed_nodes", "", "nodes that failed silently"),
          ("table_repair", "", "routing-table repair: lazy or eager"),
          ("leaf_messages", "", "messages of the leaf-set repair"),
          ("table_holes", "", "dead routing-table entries in the survivors' tables after the failure"),
          ("table_met", "", "dead entries found by routes (eager: all of table_holes)"),
          ("table_repaired", "", "dead entries replaced by a live node"),
          ("table_messages", "", "messages of the routing-table repair"),
          ("leaf_rpcs_per_failed_node", "", "leaf-set repair RPCs per failed node"),
          ("table_rpcs_per_failed_node", "", "routing-table repair RPCs per failed node"),
          ("rpcs_per_failed_node", "", "all repair RPCs per failed node (leaf set plus routing table)")),
    table("lazy_passes", "one row per pass of the lookups after the failure; only if table_repair = lazy",
          ("pass", "", "pass number, from 1"),
          ("mean_hops", "hops", "mean route length in this pass"),
          ("correct_fraction", "share", "share of lookups that ended at the closest live node"),
          ("timeouts_per_lookup", "", "mean number of timeouts on dead nodes per lookup"),
          ("entries_found_dead", "", "routing-table entries the routes of this pass found dead"),
          ("entries_replaced", "", "of those, entries replaced by a live node"),
          ("table_messages", "", "routing-table repair messages in this pass"),
          ("table_rpcs_per_failed_node", "", "routing-table repair RPCs in this pass per failed node"),
          optional=True),
)}

PASTRY_JOINS = {t.name: t for t in (
    table("joins", "one row per second join phase (improve): the grown overlay against the converged one",
          ("improve", "", "second join phase: none, rows or tables"),
          ("lookups", "", "lookups from random nodes to random keys"),
          ("correct_fraction", "share", "share of lookups that ended at the numerically closest node"),
          ("mean_hops", "hops", "mean route length on the grown overlay"),
          ("converged_mean_hops", "hops", "mean route length of the same lookups on the converged overlay"),
          ("leaf_sets_converged", "share", "share of nodes whose leaf set equals the converged one"),
          ("entries", "", "routing-table slots the converged construction fills"),
          ("proximity_best_share", "share", "share of those slots holding the proximity-best node"),
          ("invalid_entries", "", "grown entries that break the prefix/digit rule"),
          ("route_per_newcomer", "", "JOIN route messages per newcomer"),
          ("transfer_per_newcomer", "", "state transfer messages (rows, leaf set, neighbors) per newcomer"),
          ("notify_per_newcomer", "", "announcement messages to the nodes a newcomer names, per newcomer"),
          ("leaf_exchange_per_newcomer", "", "leaf-set exchange messages per newcomer"),
          ("row_exchange_per_newcomer", "", "row exchange messages (request and reply) per newcomer"),
          ("table_exchange_per_newcomer", "", "full-table exchange messages (request, reply) per newcomer")),
    table("join_quality", "one row per (second join phase, routing-table row): its slots the converged "
          "tables fill",
          ("improve", "", "second join phase: none, rows or tables"),
          ("row", "", "routing-table row, from 0"),
          ("empty", "", "slots left empty"),
          ("optimal", "", "slots holding the converged (proximity-best) node"),
          ("suboptimal", "", "slots holding another valid node"),
          ("empty_share", "share", "share of the row's slots left empty"),
          ("optimal_share", "share", "share of the row's slots holding the proximity-best node"),
          ("suboptimal_share", "share", "share of the row's slots holding another node")),
    table("timings", "one row per second join phase: wall-clock seconds",
          ("improve", "", "second join phase: none, rows or tables"),
          ("grow_s", "s", "wall time to grow the overlay by joins")),
)}

SCRIBE_MULTICAST = {t.name: t for t in (
    table("delay", "one row per topic: delay of its event via Scribe and via IP unicast from the root (the "
                   "*_ms columns are in the proximity model's unit: ms on transit-stub and matrix, plane "
                   "units on plane, radians on sphere)",
          ("topic", "", "topic number (rank)"),
          ("members", "", "subscribers of the topic"),
          ("rmd", "", "ratio: max delay via Scribe / max delay via IP unicast (RMD)"),
          ("rad", "", "ratio: mean delay via Scribe / mean delay via IP unicast (RAD)"),
          ("max_delay_scribe_ms", "ms", "largest delay from the root down the tree to a member"),
          ("max_delay_ip_ms", "ms", "largest IP unicast delay from the root to a member"),
          ("mean_delay_scribe_ms", "ms", "mean delay from the root down the tree over the members"),
          ("mean_delay_ip_ms", "ms", "mean IP unicast delay from the root over the members"),
          ("publisher_to_root_ms", "ms", "delay of the Pastry route from the topic's publisher to the root"),
          ("publisher_to_root_hops", "hops", "length of that route")),
    table("link_stress", "one row per scheme: copies per router link when every topic publishes one event "
                         "(proximity = transit-stub only)",
          ("scheme", "", "scribe or ip_multicast"),
          ("mean", "", "mean copies of the events per link used"),
          ("max", "", "most copies on one link"),
          ("links_used", "", "router-to-router links that carry at least one copy"),
          ("links_total", "", "router-to-router links in the network"),
          ("total_copies", "", "copies summed over all links"), optional=True),
    table("link_stress_distribution", "one row per (scheme, copies on a link) (proximity = transit-stub "
                                      "only)",
          ("scheme", "", "scribe or ip_multicast"),
          ("copies", "", "copies of the events carried by a link"),
          ("links", "", "links that carry that many copies"), optional=True),
    table("node_stress", "one row per metric: topics forwarded per node, children-table entries per node",
          ("metric", "", "topics_forwarded or children_entries"),
          ("mean_all_nodes", "", "mean over all nodes"),
          ("mean_nonzero", "", "mean over the nodes with any children"),
          ("max", "", "largest value at one node"),
          ("nodes_nonzero", "", "nodes with any children"),
          ("nodes", "", "all nodes")),
    table("node_stress_distribution", "one row per (metric, value)",
          ("metric", "", "topics_forwarded or children_entries"),
          ("value", "", "the metric's value at a node"),
          ("nodes", "", "nodes with that value")),
    table("timings", "one row per phase: wall-clock seconds",
          ("phase", "", "state_build_s, subscribe_s or metrics_s"),
          ("seconds", "s", "wall time of the phase")),
    table("tree_shape", "one row per topic: the shape of its Scribe tree",
          ("topic", "", "topic number (rank)"),
          ("tree_nodes", "", "nodes in the tree: root, forwarders and members"),
          ("depth", "hops", "deepest node's distance from the root, in overlay hops"),
          ("root_fanout", "", "children of the root"),
          ("mean_fanout_other", "", "mean children per forwarder other than the root"),
          ("max_fanout_other", "", "most children at a forwarder other than the root")),
)}

SCRIBE_REPAIR = {t.name: t for t in (
    table("failover", "one row per topic whose root changed in the repair",
          ("topic", "", "topic number (rank)"),
          ("old_root", "", "node number of the failed root"),
          ("new_root", "", "node number of the new root"),
          ("replicated", "", "True if the new root held the replicated topic state; else the topic is lost")),
    table("messages", "one row per message kind, over the whole run",
          ("kind", "", "message kind (Pastry repair, Scribe repair, heartbeats, retransmissions)"),
          ("messages", "", "messages of that kind")),
    table("repair", "one row per (mode, phase): deliveries to the subscribers that stay alive",
          ("mode", "", "plain Scribe or reliable (the reliable, ordered extension)"),
          ("phase", "", "publish rounds: before the failure, during the outage, or after repair"),
          ("subscribers", "", "live subscriptions (one per topic and node)"),
          ("events", "", "events published in the phase"),
          ("expected", "", "deliveries expected: events times live subscribers of their topic"),
          ("delivered", "", "distinct events delivered, summed over the subscriptions"),
          ("delivery_ratio", "share", "delivered / expected"),
          ("subscribers_with_loss", "", "subscriptions that missed at least one event of the phase"),
          ("min_subscriber_ratio", "share", "lowest share of its events one subscription received"),
          ("late_deliveries", "", "deliveries in a later round than the event was published"),
          ("out_of_order_deliveries", "", "deliveries whose sequence number is not above the previous one"),
          ("out_of_order_subscribers", "", "subscriptions with at least one out-of-order delivery")),
    table("rounds", "one row per (publish round, mode)",
          ("round", "", "publish round, from 0"),
          ("expected", "", "deliveries expected for the events published in the round"),
          ("delivered_fraction", "share", "share of them delivered, in any round"),
          ("on_time_fraction", "share", "share of them delivered in the round of publication"),
          ("mode", "", "plain Scribe or reliable (the reliable, ordered extension)")),
    table("timings", "one row per phase: wall-clock seconds",
          ("phase", "", "repair_s: Pastry and Scribe tree repair"),
          ("seconds", "s", "wall time of the phase")),
    table("tree_repair", "one row: what the tree repair did and cost",
          ("failed_nodes", "", "nodes that failed silently"),
          ("failed_roots", "", "topics whose root failed"),
          ("expired_entries", "", "children-table entries of dead children that expired"),
          ("unsubscribe_messages", "", "UNSUBSCRIBE messages from forwarders left with no children"),
          ("orphans", "", "(topic, live node) pairs whose parent died"),
          ("subscribe_messages", "", "repair SUBSCRIBE messages, one per overlay hop"),
          ("grafts", "", "children grafted onto an existing tree member"),
          ("repair_supersteps", "", "supersteps (hops) the repair SUBSCRIBEs took"),
          ("root_failovers", "", "topics whose root changed"),
          ("promoted_forwarders", "", "edges dropped from forwarders that became roots to their parents"),
          ("topics_lost", "", "topics whose new root lacked the replicated state"),
          ("scribe_repair_messages_per_failed_node", "",
           "Scribe repair messages (SUBSCRIBE and UNSUBSCRIBE) per failed node"),
          ("disconnected_subscribers", "", "live subscriptions cut off from their root during the outage"),
          ("live_subscribers", "", "live subscriptions (one per topic and node)"),
          ("detection_rounds", "", "rounds of missed heartbeats before repair (the timeout)")),
)}

def _timed_events(when: str) -> tuple[tuple[str, str, str], ...]:
    """churn's columns of Scribe events (`when`: where they were published, in words)."""
    return (("publications", "", f"events published {when}(by a live node; topics > 0)"),
            ("event_delivery_ratio", "share", "of the deliveries those events owed (each to its topic's "
                                              "subscribers up at its publication), the share made before the "
                                              "end"),
            ("event_latency_ms_mean", "ms", "mean time from publication to delivery of the deliveries made"))


CHURN = {t.name: t for t in (
    table("timeline", "one row per sweep point and bin of bin_s simulated seconds: members, lookups issued "
                      "in the bin by outcome, maintenance messages sent in it (Scribe heartbeats among "
                      "them), and Scribe events published in it (topics > 0)",
          ("mean_session_s", "s", "the sweep point's mean session time"),
          ("keepalive_s", "s", "the sweep point's keep-alive period"),
          ("time_s", "s", "simulated time at the start of the bin"),
          ("members", "", "live nodes at the end of the bin"),
          ("crashes", "", "crashes in the bin"),
          ("leaves", "", "graceful leaves in the bin"),
          ("returns", "", "returns in the bin: nodes that came back (recover_share), also those down since "
                          "the start (start = steady)"),
          ("arrivals", "", "newcomers that came up to join in the bin (arrivals = steady)"),
          ("lookups", "", "lookups issued in the bin (by a live node)"),
          ("lookup_success", "share", "of those, delivered to the live node numerically closest to the key "
                                      "at delivery"),
          ("lookup_wrong", "share", "delivered to another node"),
          ("lookup_lost", "share", "lost: past lookup_timeout_s or the bound on hops and timeouts, or at a "
                                   "node that died while the lookup waited there (the rest were still in "
                                   "flight at the end)"),
          ("lookup_latency_ms_mean", "ms", "mean time from issue to delivery of the delivered lookups"),
          ("lookup_latency_ms_p50", "ms", "median of the same"),
          ("lookup_latency_ms_p99", "ms", "99th percentile of the same"),
          ("rdp_mean", "", "mean relative delay penalty: latency over the direct delay from the source to "
                           "the node reached (plus one hop_ms), of the lookups delivered elsewhere than at "
                           "their source"),
          ("hops_mean", "hops", "mean hops of the delivered lookups"),
          ("timeouts_per_lookup", "", "mean retransmission timeouts per lookup issued"),
          ("keepalive_msgs_per_node_s", "1/s", "keep-alive probes and replies sent, per live node and "
                                               "second"),
          ("leaf_repair_msgs_per_node_s", "1/s", "leaf-set requests and replies sent, per live node and "
                                                 "second"),
          ("table_repair_msgs_per_node_s", "1/s", "routing-table requests and replies sent (a dead entry "
                                                  "being refilled), per live node and second"),
          ("leave_msgs_per_node_s", "1/s", "leave notices sent (one to each leaf-set member of a leaving "
                                           "node), per live node and second"),
          ("rejoin_msgs_per_node_s", "1/s", "messages of nodes coming back: their requests to be taken back, "
                                            "the replies, and their announcements to new leaf-set members, "
                                            "per live node and second"),
          ("join_msgs_per_node_s", "1/s", "messages of newcomers' joins: JOINs (to the contact and on each "
                                          "hop), the replies of the nodes on the route, and the newcomers' "
                                          "notices to the nodes of their tables, per live node and second "
                                          "(their requests to be taken in count as rejoins)"),
          ("heartbeat_msgs_per_node_s", "1/s", "Scribe heartbeats sent (topics > 0: a parent's to a child "
                                               "it sent no event since its last tick), per live node and "
                                               "second"),
          ("subscribe_msgs_per_node_s", "1/s", "Scribe repair messages (topics > 0): the hops of the "
                                               "SUBSCRIBEs of children that declared their parent dead and "
                                               "of subscribers that came back (those that arrived), and the "
                                               "acknowledgements of the children taken, per live node and "
                                               "second"),
          ("maintenance_msgs_per_node_s", "1/s", "all maintenance messages (the eight above) per live node "
                                                 "and second"),
          ("maintenance_bytes_per_node_s", "B/s", "the same messages' bytes (message sizes: the experiment's "
                                                  "notes) per live node and second"),
          *_timed_events("in the bin ")),
    table("repairs", "one row per sweep point and departure (crash or graceful leave): when its leaf-set "
                     "neighbours noticed it, and when their leaf sets were repaired (empty: not before the "
                     "end); a declaration counts for the node's last departure at or before it; with topics, "
                     "its children in the Scribe trees and when they noticed",
          ("mean_session_s", "s", "the sweep point's mean session time"),
          ("keepalive_s", "s", "the sweep point's keep-alive period"),
          ("node", "", "the node that crashed or left (a row each time it did)"),
          ("left_s", "s", "simulated time of the crash or leave"),
          ("graceful", "", "True for a graceful leave, False for a crash"),
          ("detectors", "", "nodes that declared it failed (by a probe, a leaf-set request, a lookup or its "
                            "leave notice)"),
          ("leaf_detectors", "", "of those, the nodes that held it in their leaf set and so repaired it"),
          ("detected_after_s", "s", "time from the departure to the first declaration"),
          ("leaf_detected_after_s", "s", "time from the departure to the last declaration by a leaf-set "
                                         "holder"),
          ("leaf_sets_repaired_after_s", "s", "time from the departure until every leaf-set holder that "
                                              "declared it had merged a leaf-set reply after declaring it"),
          ("back_s", "s", "simulated time the node came back (empty: it did not); the columns above also "
                          "count the declarations made after it came back and before it next went, by "
                          "nodes it had not told"),
          ("orphans", "", "tree edges (topic, child) the node was the parent of when it went (topics > 0; "
                          "children that went before it included; a node that came back is a parent again "
                          "only of children a SUBSCRIBE gave it since)"),
          ("orphans_noticed", "", "of those, the children that declared it dead before the end (one that "
                                  "went first, or would have after the end, does not)"),
          ("orphans_noticed_after_s", "s", "time from the departure to the last of those declarations "
                                           "(empty: none before the end)"),
          ("orphans_reconnected", "", "of the orphans, the children some node took again for the topic "
                                      "before the end (a SUBSCRIBE grafted them back)"),
          ("orphans_reconnected_after_s", "s", "time from the departure to the last of those grafts (empty: "
                                               "none before the end)")),
    table("sweep", "one row per sweep point (mean_session_s x keepalive_s), over the run from warmup_s on "
                   "(the whole run by default): the departures in that time, the lookups and events issued "
                   "in it, its messages and node life",
          ("mean_session_s", "s", "mean session time"),
          ("keepalive_s", "s", "keep-alive period"),
          ("departures", "", "crashes and graceful leaves (a node that went twice counts twice)"),
          ("returns", "", "of those, the ones the node came back from (timeline.csv's returns count "
                          "them by when they happen)"),
          ("lookups", "", "lookups issued (by a live node)"),
          ("lookup_success", "share", "of those, delivered to the live node numerically closest to the key"),
          ("lookup_wrong", "share", "delivered to another node"),
          ("lookup_lost", "share", "lost (as in timeline.csv)"),
          ("lookup_latency_ms_mean", "ms", "mean latency of the delivered lookups"),
          ("lookup_latency_ms_p99", "ms", "99th percentile of the same"),
          ("timeouts_per_lookup", "", "mean retransmission timeouts per lookup issued"),
          ("maintenance_msgs_per_node_s", "1/s", "keep-alive, leaf-set and table repair, leave, rejoin, "
                                                 "join, heartbeat and SUBSCRIBE messages per live node and "
                                                 "second"),
          ("maintenance_bytes_per_node_s", "B/s", "their bytes per live node and second"),
          ("crash_detected_after_s_mean", "s", "mean time from a crash to its first declaration"),
          ("crash_repaired_after_s_mean", "s", "mean time from a crash to the repair of every leaf set that "
                                               "held it (crashes repaired before the end)"),
          *_timed_events("")),
)}

TNO_TIMESTAMP_SIZE = {t.name: t for t in (
    table("popularity", "one row per popularity model: its law and how concentrated it is",
          ("popularity", "", "popularity model name"),
          ("law", "", "the law in words (Pareto shape, or Zipf calibrated to the paper's words)"),
          ("exponent", "", "exponent s: the topic of rank r is drawn with probability ~ r^-s"),
          ("top_0.005_draws", "share", "share of draws that go to the top 0.5% of topics"),
          ("top_0.4_draws", "share", "share of draws that go to the top 40% of topics"),
          ("topics_drawing_80pct", "", "fewest top topics that draw 80% of the picks")),
    table("timestamp_size", "one row per (popularity model, topics per client): timestamp size |SG_T|",
          ("popularity", "", "popularity model name"),
          ("topics_per_client", "", "distinct topics each client subscribes to"),
          ("subscriptions", "", "subscriptions in all (clients times topics per client)"),
          ("topics_subscribed", "", "topics with at least one subscriber"),
          ("mean_size_subscribed", "", "mean |SG_T| in entries, over topics with subscribers"),
          ("std_size_subscribed", "", "standard deviation of |SG_T| over topics with subscribers"),
          ("mean_size_weighted_subscribed", "",
           "mean |SG_T| over topics with subscribers, weighted by publication probability"),
          ("std_size_weighted_subscribed", "",
           "weighted standard deviation of |SG_T| over topics with subscribers"),
          ("mean_size_all", "", "mean |SG_T| over all topics, 0 for a topic without subscribers"),
          ("std_size_all", "", "standard deviation of |SG_T| over all topics"),
          ("mean_size_weighted_all", "", "mean |SG_T| over all topics, weighted by publication probability"),
          ("std_size_weighted_all", "", "weighted standard deviation of |SG_T| over all topics")),
)}

TNO_SEQUENCER = {t.name: t for t in (
    table("bandwidth", "one row per (popularity model, chain rule, server), at the highest event rate",
          ("popularity", "", "popularity model name"),
          ("chains", "", "chain rule: etree, interval or literal"),
          ("server", "", "server number, from 1 as in the TNO paper"),
          ("region", "", "the server's region (site), from 1"),
          ("inter_server_bytes", "bytes", "bytes the server forwarded to other servers"),
          ("handled_bytes", "bytes", "bytes of all timestamp requests the server received"),
          ("outgoing_percent", "%", "inter_server_bytes / handled_bytes x 100"),
          ("bandwidth_share", "share", "the server's share of all inter-server bytes"),
          ("timestamp_stage_share", "share", "the server's share of all timestamp stages served")),
    table("sequencer", "one row per simulated point: (popularity model, chain rule, sweep, sweep value)",
          ("popularity", "", "popularity model name"),
          ("chains", "", "chain rule: etree, interval or literal"),
          ("sweep", "", "which sweep the point belongs to: rate, service or subscriptions"),
          ("topics_per_client", "", "distinct topics each client subscribes to"),
          ("subscriptions", "", "subscriptions in all"),
          ("rate_per_s", "1/s", "offered event rate"),
          ("service_ms", "ms", "service time of one timestamp stage at a TM"),
          ("events", "", "timestamp requests published"),
          ("completed", "", "requests whose finished timestamp came back"),
          ("mean_latency_ms", "ms", "mean latency: client sends the request until the timestamp is back"),
          ("p50_latency_ms", "ms", "median latency"),
          ("p95_latency_ms", "ms", "95th percentile latency"),
          ("p99_latency_ms", "ms", "99th percentile latency"),
          ("max_latency_ms", "ms", "largest latency"),
          ("throughput_per_s", "1/s", "completions per second over the second half of the run"),
          ("inter_server_bytes", "bytes", "bytes sent between servers, all servers"),
          ("capacity_per_s", "1/s",
           "predicted saturation rate: the busiest TM's or server's cores' limit (see capacity.csv)"),
          ("mean_tms_visited", "", "expected TMs an event's chain visits"),
          ("mean_timestamp_stages", "", "expected stages per event that read or write the timestamp"),
          ("mean_servers_visited", "", "expected distinct servers an event's chain visits"),
          ("mean_timestamp_entries", "", "expected timestamp entries per event (|SG_T|)"),
          ("remote_subscription_share", "share", "share of subscriptions to a topic whose TM is elsewhere")),
    table("capacity", "one row per (popularity model, chain rule): the predicted saturation rate and the "
          "simulated peak",
          ("popularity", "", "popularity model name"),
          ("chains", "", "chain rule: etree, interval or literal"),
          ("topics_per_client", "", "distinct topics each client subscribes to (the rate sweep's)"),
          ("service_ms", "ms", "core time of one timestamp stage"),
          ("message_ms", "ms", "core time of one network message a server receives or sends"),
          ("server_cores", "", "cores of each server"),
          ("predicted_per_s", "1/s", "event rate at which the busiest TM or server saturates, from the "
                                     "chains' expected work"),
          ("bottleneck", "", "what saturates first: a server's cores, or one TM"),
          ("bottleneck_stages_per_event", "", "the bottleneck's expected timestamp stages per event (a "
                                              "server's per core)"),
          ("bottleneck_messages_per_event", "", "the bottleneck's expected network messages per event (a "
                                                "server's per core)"),
          ("saturated_from_rate_per_s", "1/s", "the lowest offered rate of the sweep whose throughput fell "
                                               "below 90% of it (empty: none did)"),
          ("simulated_peak_per_s", "1/s", "the highest throughput the rate sweep simulated")),
)}

TNO_ORDERING = {t.name: t for t in (
    table("ordering", "one row per run: (chain rule, scenario), and per (loss, recovery) in the loss sweep",
          ("chains", "", "chain rule: etree, interval or literal"),
          ("scenario", "", "tno, no_ordering, tno_subscription_changes, tno_dynamic_groups, tno_unreliable "
                           "or loss_sweep"),
          ("loss", "share", "chance an ENS delivery (loss sweep: also a sequencer message) is lost"),
          ("recovery", "", "True if subscribers recover gaps by asking their Scribe parent"),
          ("subscribers", "", "subscribing clients"),
          ("events", "", "events published"),
          ("notifications", "", "notifications delivered to the application, all subscribers"),
          ("subscriber_pairs", "", "pairs of subscribers compared"),
          ("violating_pairs", "", "subscriber pairs notified of two common events in different orders"),
          ("inverted_event_pairs", "",
           "event pairs two subscribers saw in different orders, summed over subscriber pairs"),
          ("undelivered", "", "events received but never notified (still buffered at the end)"),
          ("out_of_order_tags", "", "notifications tagged out of order (released past a gap)"),
          ("released_buffer_full", "", "events released past a gap because the buffer was full"),
          ("released_ttl", "", "events released past a gap because they waited ttl_ms"),
          ("peak_buffered", "", "the most events one subscriber held waiting at once, before any forced "
                                "release (buffer_size at least this forces none)"),
          ("lost", "", "ENS copies lost"),
          ("mean_buffering_ms", "ms", "mean delay from arrival to notification"),
          ("p99_buffering_ms", "ms", "99th percentile delay from arrival to notification"),
          ("mean_timestamp_latency_ms", "ms", "mean time from timestamp request until the timestamp is back"),
          ("mean_timestamp_entries", "", "mean (topic, counter) entries of an event's timestamp"),
          ("mean_tms_visited", "", "mean TMs an event's timestamp request visits (relays included)"),
          ("recovery_messages", "", "gap recovery requests, replies and 'not yet' answers"),
          ("recovered", "", "events subscribers got by asking (can exceed lost: late events too)"),
          ("sequencer_resends", "", "sequencer messages lost and sent again"),
          ("causal_violations", "", "notifications out of causal order: (subscriber, e, e') with e' "
                                    "published after its client was notified of e, and e' notified first; "
                                    "empty where too many to count")),
)}

OUTPUTS = {
    "pastry_hops": PASTRY_HOPS,
    "pastry_failures": PASTRY_FAILURES,
    "pastry_joins": PASTRY_JOINS,
    "scribe_multicast": SCRIBE_MULTICAST,
    "scribe_small_groups": SCRIBE_MULTICAST,
    "scribe_repair": SCRIBE_REPAIR,
    "churn": CHURN,
    "tno_timestamp_size": TNO_TIMESTAMP_SIZE,
    "tno_sequencer": TNO_SEQUENCER,
    "tno_ordering": TNO_ORDERING,
}
