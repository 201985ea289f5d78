from django.apps import AppConfig


class NetworkingConfig(AppConfig):
    name = "networking"
