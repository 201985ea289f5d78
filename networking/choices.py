from django.db import models


class Purpose(models.TextChoices):
    MANAGEMENT = "management", "Management (SSH, control)"
    COMPUTE = "compute", "Compute (NCCL / Gloo traffic)"
    STORAGE = "storage", "Storage"


class CniType(models.TextChoices):
    IPVLAN_L2 = "ipvlan-l2", "ipvlan (L2 mode)"
    MACVLAN_BRIDGE = "macvlan-bridge", "macvlan (bridge mode)"
