cd scripts/device
export PYTHONPATH=../../src:. IRON_CACHE_DIR=/tmp/iron-cache
timeout 200 ncu --clock-control none --set full --import-source no -k "regex:gemm_ws" -c 1 -o $OUT/iron -f python3 gemm_tune.py --sizes 4096 --configs WS_256_S4 --check-only > /dev/null 2>&1
timeout 200 ncu --clock-control none --set full -k "regex:^(?!gemm_ws)" -c 3 -o $OUT/cublas -f python3 gemm_tune.py --sizes 4096 --configs WS_256_S4 --check-only > /dev/null 2>&1
for r in iron cublas; do ncu -i $OUT/$r.ncu-rep --page details > $OUT/$r.txt 2>&1; done
ncu -i $OUT/iron.ncu-rep --page source --csv --print-source sass > $OUT/iron_source.csv 2>&1
grep -E "^  [a-zA-Z_].*\(|Duration|Cluster Size|Block Size|Grid Size|Registers Per|Dynamic Shared|L2 Cache Throughput|DRAM Throughput|Compute \(SM\)|L1/TEX Hit|L2 Hit" $OUT/cublas.txt | head -40
