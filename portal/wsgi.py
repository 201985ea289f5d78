import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()

from jobs.forward_auth import FastPath  # noqa: E402  (needs the apps loaded)

application = FastPath(application)

from django.urls import get_resolver  # noqa: E402

from core.heap import freeze_loaded  # noqa: E402

get_resolver().url_patterns  # noqa: B018  (imports every view now, not on the first request)
freeze_loaded()
