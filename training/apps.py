from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"
    verbose_name = "Training: reward specs, datasets, runs and cycles"

    def ready(self):
        from serving.signals import adapters_tainted, candidate_uploaded
        from tenants.signals import organization_deleted
        from training.cycles import cycle_for_upload, retrain_tainted
        from training.runs import org_work_destroy

        organization_deleted.connect(org_work_destroy, dispatch_uid="training.org_work_destroy")
        adapters_tainted.connect(retrain_tainted, dispatch_uid="training.retrain_tainted")
        candidate_uploaded.connect(cycle_for_upload, dispatch_uid="training.cycle_for_upload")
