"""The webhook receiver: a vendor's delivery (GitHub, GitLab, Linear, Jira) verified, then only
naming which pollers to poll now. Polling stays the source of truth; a delivery makes it prompt.

``verify`` (one pure function per vendor: headers, raw body, secret -> accepted or refused),
``memory`` (the delivery ids already accepted, bounded), ``refresher`` (the polls a delivery
asks for, coalesced per poller: at once, then one trailing poll per ``min_gap``), ``receiver``
(the ``/hooks/*`` routes over those), ``settings`` (``[webhooks]``) and ``stats`` (what
``/metrics`` says of them). A delivery writes nothing durable: a kill in the middle of one loses
only latency (the next interval poll sees what it would have).
"""
