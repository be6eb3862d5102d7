"""The heartbeats of processes serving with the in-memory event bus (streaming/presence.py).

Depends on 0007_retention, the newest migration when it was written (issue 18's other parts
add migrations alongside: the integrator orders them).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("a2a_endpoint", "0007_retention"),
    ]

    operations = [
        migrations.CreateModel(
            name="ServerProcess",
            fields=[
                ("id", models.UUIDField(editable=False, primary_key=True, serialize=False)),
                ("host", models.CharField(max_length=255, verbose_name="host")),
                (
                    "pid_namespace",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Linux only.",
                        max_length=64,
                        verbose_name="PID namespace",
                    ),
                ),
                ("pid", models.PositiveIntegerField(verbose_name="process id")),
                ("started_at", models.DateTimeField(verbose_name="started")),
                ("seen_at", models.DateTimeField(verbose_name="last heartbeat")),
            ],
            options={
                "verbose_name": "server process",
                "verbose_name_plural": "server processes",
                "ordering": ["-seen_at"],
                "indexes": [models.Index(fields=["seen_at"], name="a2a_process_seen")],
            },
        ),
    ]
