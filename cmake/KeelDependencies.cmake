# Finds keel's build dependencies (all Debian packages; see scripts/setup.sh).
include(GNUInstallDirs)
find_package(fmt 9 REQUIRED)
find_package(xsimd 8 REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)  # gzip IDX files and .npz archives (src/data/)
