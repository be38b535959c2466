/*
 * The signature part's anchor for bench/parts.sh: OpenSSL's EVP_DigestSign timed by the
 * calling process's own clock, called the way libssl 3 signs TLS 1.3's CertificateVerify
 * (tls_construct_cert_verify): per signature a fresh EVP_MD_CTX, EVP_DigestSignInit_ex with
 * SHA-256 (RSA: PSS padding, salt length = digest length), EVP_DigestSign with no buffer
 * (the length), then EVP_DigestSign with one. Only that last call is timed
 * (CLOCK_MONOTONIC right before and right after it): the call the probe's `signature`
 * part times (the probe skips the length-only call).
 *
 * Usage: sign_alone KEY.pem COUNT   prints the median µs of COUNT signatures.
 * Build: cc -O2 -o sign_alone sign_alone.c -lcrypto (libssl-dev).
 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s KEY.pem COUNT\n", argv[0]);
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		fprintf(stderr, "%s: cannot open\n", argv[1]);
		return 2;
	}
	EVP_PKEY *pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	if (!pkey) {
		fprintf(stderr, "%s: not a PEM private key\n", argv[1]);
		return 2;
	}
	long n = atol(argv[2]);
	if (n < 1 || n > 1000000) {
		fprintf(stderr, "COUNT: 1 to 1000000\n");
		return 2;
	}
	int rsa = EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA;
	/* TLS 1.3's signed content: 64 spaces, the context string, a zero, the transcript hash. */
	unsigned char tbs[64 + 33 + 1 + 32];
	memset(tbs, 0x20, 64);
	memcpy(tbs + 64, "TLS 1.3, server CertificateVerify", 33);
	tbs[97] = 0;
	for (int i = 0; i < 32; i++)
		tbs[98 + i] = (unsigned char)i;
	double *us = malloc(sizeof(double) * n);
	unsigned char *sig = malloc(1024);
	for (long i = 0; i < n; i++) {
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_PKEY_CTX *pctx = NULL;
		size_t len = 0;
		if (!md || EVP_DigestSignInit_ex(md, &pctx, "SHA256", NULL, NULL, pkey, NULL) <= 0 ||
		    (rsa && (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) <= 0 ||
			     EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) <= 0)) ||
		    EVP_DigestSign(md, NULL, &len, tbs, sizeof tbs) <= 0 || len > 1024) {
			fprintf(stderr, "%s: cannot set up signing with this key\n", argv[1]);
			return 1;
		}
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		int ok = EVP_DigestSign(md, sig, &len, tbs, sizeof tbs);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (ok <= 0) {
			fprintf(stderr, "%s: signing failed\n", argv[1]);
			return 1;
		}
		us[i] = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
		EVP_MD_CTX_free(md);
	}
	qsort(us, n, sizeof(double), cmp);
	printf("%.3f\n", us[n / 2]);
	return 0;
}
