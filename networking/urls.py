from django.urls import path

from . import views

app_name = "networking"
urlpatterns = [
    path("network/pools/", views.pool_list, name="list"),
    path("network/pools/new/", views.pool_edit, name="create"),
    path("network/pools/<slug:name>/", views.pool_detail, name="detail"),
    path("network/pools/<slug:name>/edit/", views.pool_edit, name="edit"),
    path("network/pools/<slug:name>/delete/", views.pool_delete, name="delete"),
    path(
        "network/pools/<slug:name>/reservations/<int:reservation_id>/release/",
        views.release_reservation,
        name="release-reservation",
    ),
    path(
        "network/pools/<slug:name>/allocations/release/",
        views.release_whereabouts_allocation,
        name="release-allocation",
    ),
]
