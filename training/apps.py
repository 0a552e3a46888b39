from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"
    verbose_name = "Training: reward specs, datasets, runs and cycles"

    def ready(self):
        from tenants.signals import organization_deleted
        from training.runs import org_work_destroy

        organization_deleted.connect(org_work_destroy, dispatch_uid="training.org_work_destroy")
