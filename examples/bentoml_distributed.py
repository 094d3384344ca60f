"""BentoML's "Run distributed Services" example, ported by renaming the import.

    curl -s localhost:3000/classify -H 'Content-Type: application/json' \\
         -d '{"input_series": [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]]}'
    # [0,2]

The code below is BentoML's (docs.bentoml.com, build-with-bentoml/distributed-services)
with `bentoml` renamed `tensorwire`, save for the model: BentoML's loads
`iris_sklearn:latest` from its model store with joblib, which needs a trained model in
that store; here it is a nearest-centroid classifier over the iris species' mean
measurements, in NumPy, so that the example runs anywhere. tests/e2e/
test_bentoml_distributed.py serves this very file with tensorwire, and with BentoML 1.4
after renaming `tensorwire` back to `bentoml`, and gets the same answers.

`IrisClassifier` depends on `Preprocessing`. `tensorwire serve
examples.bentoml_distributed:IrisClassifier` runs both in one process (the dependency
called in-process); `--dependency Preprocessing=grpc://host:port` places it elsewhere.
"""

import numpy as np

import tensorwire

#: The mean sepal length, sepal width, petal length and petal width of each iris species
#: (setosa, versicolor, virginica) in Fisher's data.
CENTROIDS = np.array([[5.006, 3.428, 1.462, 0.246],
                      [5.936, 2.770, 4.260, 1.326],
                      [6.588, 2.974, 5.552, 2.026]])


class NearestCentroid:
    """Stands in for the joblib-loaded scikit-learn model: `predict` gives the index of
    the nearest species mean."""

    def __init__(self, centroids: np.ndarray) -> None:
        self.centroids = centroids

    def predict(self, rows: np.ndarray) -> np.ndarray:
        distances = ((np.asarray(rows)[:, None, :] - self.centroids[None]) ** 2).sum(-1)
        return distances.argmin(axis=1)


@tensorwire.service(resources={"cpu": "200m", "memory": "512Mi"})
class Preprocessing:
    # A dummy prepocessing Service
    @tensorwire.api
    def preprocess(self, input_series: np.ndarray) -> np.ndarray:
        return input_series


@tensorwire.service(resources={"cpu": "1", "memory": "2Gi"})
class IrisClassifier:
    # Declare the preprocessing Service as a dependency
    preprocessing = tensorwire.depends(Preprocessing)

    def __init__(self):
        # BentoML's: self.model = joblib.load(self.iris_model.path_of("model.pkl"))
        self.model = NearestCentroid(CENTROIDS)

    @tensorwire.api
    def classify(self, input_series: np.ndarray) -> np.ndarray:
        input_series = self.preprocessing.preprocess(input_series)
        return self.model.predict(input_series)
