import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
application = get_wsgi_application()

from jobs.forward_auth import FastPath  # noqa: E402  (needs the apps loaded)

application = FastPath(application)
