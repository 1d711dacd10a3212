/* Exported wrappers for libfabric's `static inline` calls, which have no symbol in libfabric.so.
 * Each circ_X(args) is exactly X(args). Only calls present in both the 1.x (>= 1.15) and 2.x
 * headers are wrapped. */
#ifndef CIRCULANT_SHIM_H
#define CIRCULANT_SHIM_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

/* The API version of the headers compiled against: FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION). */
uint32_t circ_fi_header_version(void);

/* Progress models of an fi_info's domain (FI_PROGRESS_UNSPEC without one). Read in C because
 * the 2.x headers may alias data_progress through an anonymous union and retire
 * control_progress, which a bindgen field access would not survive. */
int circ_fi_info_data_progress(const struct fi_info *info);
int circ_fi_info_control_progress(const struct fi_info *info);

/* Sets the default authorization key of an fi_info's domain to a malloc'ed copy of the len
 * bytes at key, which fi_freeinfo frees with the info (an earlier key is freed here). Returns 0,
 * -FI_EINVAL without a domain attribute or key, -FI_ENOMEM. */
int circ_fi_info_set_auth_key(struct fi_info *info, const uint8_t *key, size_t len);

struct fi_info *circ_fi_allocinfo(void);
int circ_fi_close(struct fid *fid);

int circ_fi_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain,
		   void *context);
int circ_fi_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		     void *context);
int circ_fi_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av,
		    void *context);
int circ_fi_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
		      uint64_t flags, void *context);
int circ_fi_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags);
int circ_fi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq,
		    void *context);
ssize_t circ_fi_cq_read(struct fid_cq *cq, void *buf, size_t count);
ssize_t circ_fi_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags);
ssize_t circ_fi_cq_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond,
			 int timeout);
const char *circ_fi_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
				char *buf, size_t len);
int circ_fi_cq_signal(struct fid_cq *cq);
int circ_fi_mr_reg(struct fid_domain *domain, const void *buf, size_t len, uint64_t access,
		   uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
		   void *context);
void *circ_fi_mr_desc(struct fid_mr *mr);
uint64_t circ_fi_mr_key(struct fid_mr *mr);
int circ_fi_mr_bind(struct fid_mr *mr, struct fid *bfid, uint64_t flags);
int circ_fi_mr_enable(struct fid_mr *mr);
int circ_fi_ep_bind(struct fid_ep *ep, struct fid *bfid, uint64_t flags);
int circ_fi_enable(struct fid_ep *ep);
int circ_fi_getname(fid_t fid, void *addr, size_t *addrlen);
int circ_fi_control(struct fid *fid, int command, void *arg);

ssize_t circ_fi_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		      fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context);
ssize_t circ_fi_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
		       fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context);
ssize_t circ_fi_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags);
ssize_t circ_fi_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			  uint64_t data, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
			  void *context);
ssize_t circ_fi_inject_write(struct fid_ep *ep, const void *buf, size_t len,
			     fi_addr_t dest_addr, uint64_t addr, uint64_t key);
ssize_t circ_fi_inject_writedata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				 fi_addr_t dest_addr, uint64_t addr, uint64_t key);
ssize_t circ_fi_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
		     uint64_t addr, uint64_t key, void *context);
ssize_t circ_fi_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags);

ssize_t circ_fi_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		     fi_addr_t dest_addr, void *context);
ssize_t circ_fi_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
		     void *context);
ssize_t circ_fi_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags);
ssize_t circ_fi_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr);
ssize_t circ_fi_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc,
		      fi_addr_t dest_addr, uint64_t tag, void *context);
ssize_t circ_fi_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
		      uint64_t tag, uint64_t ignore, void *context);
ssize_t circ_fi_cancel(fid_t fid, void *context);

#endif
