// A typical single-kernel source for the compile benchmark: a shared-memory
// tiled SGEMM (C = alpha * A * B + beta * C, row major) with a 4x4 register
// tile per thread. Written for timing the compiler, not for speed records.
#define TILE 64
#define KTILE 16
#define THREAD_TILE 4

__global__ void __launch_bounds__(256) sgemm_tiled(int m, int n, int k, float alpha,
						   const float *__restrict__ a,
						   const float *__restrict__ b, float beta,
						   float *__restrict__ c)
{
	__shared__ float a_tile[KTILE][TILE + 1];
	__shared__ float b_tile[KTILE][TILE + 1];
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int row0 = blockIdx.y * TILE + ty * THREAD_TILE;
	const int col0 = blockIdx.x * TILE + tx * THREAD_TILE;
	float acc[THREAD_TILE][THREAD_TILE] = {};

	for (int k0 = 0; k0 < k; k0 += KTILE) {
		for (int i = threadIdx.x; i < TILE * KTILE; i += blockDim.x) {
			int r = i / KTILE, kk = i % KTILE;
			int gr = blockIdx.y * TILE + r, gk = k0 + kk;
			a_tile[kk][r] = (gr < m && gk < k) ? a[gr * k + gk] : 0.0f;
			int bk = i / TILE, bc = i % TILE;
			int gc = blockIdx.x * TILE + bc, gbk = k0 + bk;
			b_tile[bk][bc] = (gbk < k && gc < n) ? b[gbk * n + gc] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < KTILE; kk++) {
			float a_frag[THREAD_TILE], b_frag[THREAD_TILE];
#pragma unroll
			for (int i = 0; i < THREAD_TILE; i++) {
				a_frag[i] = a_tile[kk][ty * THREAD_TILE + i];
				b_frag[i] = b_tile[kk][tx * THREAD_TILE + i];
			}
#pragma unroll
			for (int i = 0; i < THREAD_TILE; i++)
#pragma unroll
				for (int j = 0; j < THREAD_TILE; j++)
					acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < THREAD_TILE; i++)
#pragma unroll
		for (int j = 0; j < THREAD_TILE; j++) {
			int r = row0 + i, col = col0 + j;
			if (r < m && col < n)
				c[r * n + col] = alpha * acc[i][j] + beta * c[r * n + col];
		}
}
