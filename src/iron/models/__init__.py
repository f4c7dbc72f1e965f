"""Models built on iron.std: a Llama-architecture decoder from GGUF weights (:mod:`iron.models.llama`), its PyTorch
reference (:mod:`iron.models.reference`) and the GGUF reading (:mod:`iron.models.gguf_file`)."""
