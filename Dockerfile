# The code location image: the package, its models (spaCy and MiniLM ship as PyPI packages, so
# nothing is downloaded at run time) and the celery, k8s and s3 extras.
#   docker build -t seem-dagster .                 CPU (the default target)
#   docker build --target gpu -t seem-dagster:gpu . CUDA, with the vllm extra, for extraction on the GPU pool
# Its default command serves the definitions over gRPC (the Helm chart's user deployment runs the
# same module with `dagster api grpc`). Not built on the development machines (README, "Deploy").

ARG PYTHON_IMAGE=python:3.12-slim
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04

# ---- GPU: CUDA runtime, Ubuntu 24.04's Python 3.12, the vllm extra --------------------------------
FROM ${CUDA_IMAGE} AS gpu
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* && python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 DAGSTER_HOME=/opt/dagster/dagster_home
WORKDIR /opt/seem
COPY pyproject.toml README.md ./
COPY seem_dagster ./seem_dagster
COPY data ./data
COPY deploy ./deploy
RUN pip install ".[celery,k8s,s3,vllm]" && mkdir -p "$DAGSTER_HOME" && cp deploy/dagster.yaml "$DAGSTER_HOME/"
RUN useradd --create-home --uid 10001 seem && chown -R seem "$DAGSTER_HOME"
USER seem
# The entity names' static embedding table (synonyms.embedder), distilled once from MiniLM into the image.
RUN python -c "from seem_dagster import backends; backends.embedder('minilm-static').encode(['warm'])"
EXPOSE 3030
CMD ["dagster", "api", "grpc", "--host", "0.0.0.0", "--port", "3030", "--module-name", "seem_dagster.definitions"]

# ---- CPU (default) ------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS cpu
# torch is pinned in pyproject.toml; point pip at PyTorch's CPU wheel index here to keep the image
# free of the CUDA build: --build-arg PIP_EXTRA_INDEX_URL=<that index>.
ARG PIP_EXTRA_INDEX_URL=
ENV PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1 DAGSTER_HOME=/opt/dagster/dagster_home
WORKDIR /opt/seem
COPY pyproject.toml README.md ./
COPY seem_dagster ./seem_dagster
COPY data ./data
COPY deploy ./deploy
RUN pip install ".[celery,k8s,s3]" && mkdir -p "$DAGSTER_HOME" && cp deploy/dagster.yaml "$DAGSTER_HOME/"
RUN useradd --create-home --uid 10001 seem && chown -R seem "$DAGSTER_HOME"
USER seem
# The entity names' static embedding table (synonyms.embedder), distilled once from MiniLM into the image.
RUN python -c "from seem_dagster import backends; backends.embedder('minilm-static').encode(['warm'])"
EXPOSE 3030
CMD ["dagster", "api", "grpc", "--host", "0.0.0.0", "--port", "3030", "--module-name", "seem_dagster.definitions"]
